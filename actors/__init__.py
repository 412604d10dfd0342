"""Ray actors (installed as `mkb_ray.actors`): thin shells around core functions. `ray.remote` is applied where
actors are built (`make_*` functions), so tests can construct the plain classes without a cluster."""
