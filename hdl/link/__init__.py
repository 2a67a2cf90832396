"""NeuronLink router and torus network tops in Amaranth."""
