"""The lowest floor of the runtime: settings, the error tree, statuses, results, texts and the
session's entry types. No I/O beyond reading a config file; imports nothing of agentrt's above it."""
