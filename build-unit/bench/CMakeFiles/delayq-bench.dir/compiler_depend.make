# Empty compiler generated dependencies file for delayq-bench.
# This may be replaced when dependencies are built.
