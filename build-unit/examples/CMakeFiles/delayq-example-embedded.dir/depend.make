# Empty dependencies file for delayq-example-embedded.
# This may be replaced when dependencies are built.
