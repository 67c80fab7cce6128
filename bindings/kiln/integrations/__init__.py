"""kiln with trainers: strategies that compile a module after the trainer wrapped it."""
