#!/bin/bash
# The site starts 8 seconds after the container: an agent that does not wait for the healthcheck
# finds nothing listening.
mkdir -p /srv/site
echo "site-ready-7311" > /srv/site/status.txt
( sleep 8; exec python3 -m http.server 8080 --bind 127.0.0.1 --directory /srv/site >/dev/null 2>&1 ) &
if [ $# -eq 0 ]; then set -- sleep infinity; fi
exec "$@"
