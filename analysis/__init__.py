"""Analysis of stored records (paired lift, standing, propagation, reports): reads records, never writes them.

Installed as `mkb_ray.analysis`. Empty until the store exists (issue 4 and later).
"""
