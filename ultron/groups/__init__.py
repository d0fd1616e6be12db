"""Groups of agents: memories with scope 'group' are visible to the group's members only."""
