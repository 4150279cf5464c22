# Empty dependencies file for conformance_test.
# This may be replaced when dependencies are built.
