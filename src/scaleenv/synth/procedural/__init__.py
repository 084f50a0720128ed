"""The offline back end: blueprint catalog -> DomainSpec + seed world, deterministically."""
