"""What the runner knows of the P1 contract: the simulated control plane, the git origin, evidence and gates."""
