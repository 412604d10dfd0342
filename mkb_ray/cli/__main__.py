"""`python -m mkb_ray.cli` is `mkb`."""
from . import main

raise SystemExit(main())
