"""Teachers: where the policy's SFT data comes from."""
