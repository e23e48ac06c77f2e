"""Paired A/B campaigns: two collector versions, alternated round by round on one device."""
