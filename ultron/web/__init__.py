"""The dashboard: static assets served at /dashboard and the JSON it reads under /api/dashboard."""
