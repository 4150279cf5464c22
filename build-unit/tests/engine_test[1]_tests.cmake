set(  engine_test_TESTS)
