"""The Gymnasium contract: validation, lifecycle, autoreset, seeding and sharding over tasks and transport."""
