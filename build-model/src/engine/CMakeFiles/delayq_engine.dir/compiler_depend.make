# Empty compiler generated dependencies file for delayq_engine.
# This may be replaced when dependencies are built.
