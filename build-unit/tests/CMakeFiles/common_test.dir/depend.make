# Empty dependencies file for common_test.
# This may be replaced when dependencies are built.
