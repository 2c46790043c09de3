# The Debian 12 stand-in root, shared by scripts/image.sh (the image's stand-in bases) and
# tests/packages/check_debs.sh (a clean root to install the .debs into): `debootstrap
# --variant=minbase` from this machine's apt mirror, once, cached as a tarball in $CACHE.
# The caller sets CACHE and STANDIN_SUITE and defines say, die and have.

# The Debian mirror apt uses here: the only network this may have.
apt_mirror() {
  local m
  m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\//) { print $i; exit } }' |
      grep -v -- '-security' | head -n1 || true)
  [ -n "$m" ] || m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
      awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' | grep -E '/debian/?$' | head -n1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

standin_tarball() {
  local tarball=$CACHE/debian-$STANDIN_SUITE-minbase.tar.gz
  if [ -s "$tarball" ]; then
    say "stand-in rootfs cached: $tarball" >&2
    echo "$tarball"; return
  fi
  have debootstrap || die "debootstrap missing (scripts/install-deps.sh --container)"
  [ "$(id -u)" -eq 0 ] || die "debootstrap needs root to make the stand-in base"
  local mirror rootfs
  mirror=$(apt_mirror); mirror=${mirror%/}
  rootfs=$CACHE/rootfs-$STANDIN_SUITE
  mkdir -p "$CACHE"
  rm -rf "$rootfs"
  say "debootstrap --variant=minbase $STANDIN_SUITE from $mirror (once; cached in $CACHE)" >&2
  if ! debootstrap --variant=minbase "$STANDIN_SUITE" "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1; then
    tail -n 20 "$CACHE/debootstrap.log" >&2
    die "debootstrap failed (log: $CACHE/debootstrap.log)"
  fi
  # Security updates too, as the real bases get; install-deps.sh runs apt-get update on this.
  local sec=${mirror%/debian}/debian-security
  cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $mirror $STANDIN_SUITE main
deb $mirror $STANDIN_SUITE-updates main
deb $sec $STANDIN_SUITE-security main
EOF
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
  tar -C "$rootfs" --numeric-owner -czf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$rootfs"
  echo "$tarball"
}
