# Empty dependencies file for engine_test.
# This may be replaced when dependencies are built.
