"""Adapters from GenesisVectorEnv to what other libraries expect."""
