set(  common_test_TESTS)
