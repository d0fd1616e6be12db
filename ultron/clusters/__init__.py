"""Knowledge clusters: each memory joins the nearest centroid in its upload transaction."""
