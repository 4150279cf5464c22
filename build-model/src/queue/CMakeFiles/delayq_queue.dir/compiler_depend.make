# Empty compiler generated dependencies file for delayq_queue.
# This may be replaced when dependencies are built.
