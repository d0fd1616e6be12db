"""The Skill Hub: clusters crystallized into versioned, grounded SKILL.md skills."""
