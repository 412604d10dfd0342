"""Cluster tooling that is not part of a campaign's data path: a fake multi-node autoscaling cluster on loopback
(fake.py), for the scale-out tests and the scheduler benchmark."""
