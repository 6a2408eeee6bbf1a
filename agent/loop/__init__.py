"""What one turn needs at run time and never persists: the LoopRuntime, models, context and tokens, skills, todos."""
