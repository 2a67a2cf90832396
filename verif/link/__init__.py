"""cocotb benches of the NeuronLink router and torus networks, and their pure-Python parts."""
