"""The data formats every stage shares: the domain spec, the task, the trajectory."""
