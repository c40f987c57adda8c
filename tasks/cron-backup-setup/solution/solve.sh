#!/bin/bash
set -e
ls -laR /app/data

mkdir -p /app/bin && cat > /app/bin/backup.sh <<'SH'
#!/bin/bash
# Nightly backup of /app/data to /app/backups/data-YYYYMMDD.tar.gz; keeps 7 days.
set -euo pipefail
dest=/app/backups
mkdir -p "$dest"
archive="$dest/data-$(date +%Y%m%d).tar.gz"
tar -C /app --exclude='*.tmp' -czf "$archive.partial" data
mv -f "$archive.partial" "$archive"
find "$dest" -maxdepth 1 -type f -name 'data-*.tar.gz' -mtime +7 -delete
SH

chmod 0755 /app/bin/backup.sh

mkdir -p /etc/cron.d && printf '# Nightly backup of /app/data\n30 2 * * * root /app/bin/backup.sh >> /var/log/app-backup.log 2>&1\n' > /etc/cron.d/app-backup && chmod 0644 /etc/cron.d/app-backup

chmod 0700 /app/data/secrets && find /app/data/secrets -type f -exec chmod 0600 {} +

cd / && /app/bin/backup.sh && ls -l /app/backups && tar tzf /app/backups/data-$(date +%Y%m%d).tar.gz
