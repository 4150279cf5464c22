# Empty dependencies file for delayq_common.
# This may be replaced when dependencies are built.
