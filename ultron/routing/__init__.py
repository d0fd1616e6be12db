"""The HTTP kit every router uses: FastAPI dependencies (the acting agent, the request's unit of work,
service getters), the error bodies and their one handler, and the Bearer-key policy.

Below every domain: it imports no domain, no `ultron.hub` and no `ultron.api`; a domain's router types
its own service getters with `hub_part`.
"""
