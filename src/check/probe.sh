# halobox check: what the container user sees. POSIX sh (busybox, dash and
# bash all run it); python is optional. Every fact is one line
# `@@hbx KEY VALUE…` on stdout, so nothing else printed there (toolbox,
# Python warnings) is mistaken for one.
P=@@hbx
say() { printf '%s %s\n' "$P" "$*"; }
flat() { tr '\n\r\t' '   ' | cut -c1-300; }
T=
if command -v timeout >/dev/null 2>&1; then T="timeout 120"; fi
say probe 1
say uid "$(id -u 2>/dev/null)"
say user "$(id -un 2>/dev/null)"
say groups "$(id -G 2>/dev/null)"
# `ulimit -l` is not POSIX, but dash, busybox ash and bash all have it.
# shellcheck disable=SC3045
say memlock "$(ulimit -l 2>/dev/null)"
if [ -n "${HSA_OVERRIDE_GFX_VERSION+set}" ]; then
  say env HSA_OVERRIDE_GFX_VERSION "$HSA_OVERRIDE_GFX_VERSION"
fi
for f in /dev/kfd /dev/dri/renderD* /dev/infiniband/* /dev/odl_tb5_*; do
  [ -c "$f" ] || continue
  st=$(stat -L -c '%a %u %g' "$f" 2>/dev/null) || st=
  [ -n "$st" ] || st='- - -'
  a=
  if [ -r "$f" ]; then a=r; fi
  if [ -w "$f" ]; then a="${a}w"; fi
  if err=$( (exec 3<>"$f") 2>&1 ); then
    op=ok
  else
    op=$(printf '%s' "$err" | flat)
    [ -n "$op" ] || op=failed
  fi
  say dev "$f" "$st" "${a:--}" "$op"
done
if [ -d /sys/class/infiniband ]; then
  say rdma yes
  for p in /sys/class/infiniband/*/ports/*; do
    [ -d "$p" ] || continue
    d=${p#/sys/class/infiniband/}
    d=${d%%/*}
    ll=$(flat 2>/dev/null <"$p/link_layer")
    state=$(flat 2>/dev/null <"$p/state")
    say rdma.port "$d" "${p##*/}" "${ll:--}" "${state:--}"
  done
  for d in /sys/class/infiniband/*; do
    [ -e "$d/device/driver" ] || continue
    drv=$(readlink -f "$d/device/driver" 2>/dev/null) || drv=
    say rdma.driver "${d##*/}" "${drv##*/}"
  done
else
  say rdma no
fi
# rdma-core (libibverbs and its providers, irdma's among them): the release
# halobox's image built over the distribution's, else the package.
rc_v=
if [ -s /opt/halobox/rdma-core.version ]; then
  rc_v=$(head -n 1 /opt/halobox/rdma-core.version)
elif command -v rpm >/dev/null 2>&1; then
  rc_v=$(rpm -q --qf '%{VERSION}' libibverbs 2>/dev/null) || rc_v=
fi
if [ -z "$rc_v" ] && command -v dpkg-query >/dev/null 2>&1; then
  rc_v=$(dpkg-query -W -f '${Version}' libibverbs1 2>/dev/null) || rc_v=
fi
say rdma.core "${rc_v:--}"
# The RCCL ABI gate of the image build, run here: the librccl the loader
# gives libtorch_hip.so (ldd), and the nccl*/rccl* symbols it lacks.
G=/opt/halobox/bin/rccl-abi-check.sh
if [ -r "$G" ] && command -v bash >/dev/null 2>&1 && command -v nm >/dev/null 2>&1 && command -v ldd >/dev/null 2>&1; then
  n=0
  for c in $(find /opt /usr/local/lib /usr/lib -xdev -name libtorch_hip.so -type f 2>/dev/null | head -n 4); do
    n=$((n + 1))
    lib=$(ldd "$c" 2>/dev/null | awk '$1 ~ /^librccl/ { print ($3 == "not" ? "-" : $3); exit }')
    if [ -z "$lib" ] || [ "$lib" = - ]; then
      say rccl.gate "$c" - none
      continue
    fi
    out=$(bash "$G" "$c" -- "$lib" 2>&1)
    code=$?
    missing=$(printf '%s\n' "$out" | sed -n 's/^  //p' | head -n 20 | tr '\n' ' ')
    say rccl.gate "$c" "$lib" "$code" "$missing"
  done
  [ "$n" -gt 0 ] || say rccl.gate - - notorch
else
  say rccl.gate - - unavailable
fi
# How each librccl was built (src/check/probe.rs, RcclBuild): fault
# injection compiled in (RCCL_INJECT_FAULTS), the net-ib gate of
# ROCm/rocm-systems PR 8512 (RCCL_IB_FAULT_INJECTION), and, with the image's
# marker check, its gfx1151 code objects (offload-bundle entries), bundles
# read, compressed bundles unreadable, bundle magics that are not a bundle.
M=/opt/halobox/bin/rccl-markers.sh
for lib in $(find /opt /usr/lib /usr/lib64 /usr/local/lib -xdev -name 'librccl.so*' -type f 2>/dev/null | head -n 8); do
  inj=no
  ib=no
  if grep -q -F RCCL_INJECT_FAULTS "$lib" 2>/dev/null; then inj=yes; fi
  if grep -q -F RCCL_IB_FAULT_INJECTION "$lib" 2>/dev/null; then ib=yes; fi
  objs=
  if [ -r "$M" ] && command -v bash >/dev/null 2>&1; then
    objs=$(bash "$M" "$lib" gfx1151 2>/dev/null | sed -n 's/^rccl-markers: .*: \([0-9]*\) gfx1151 code object(s) in [0-9]* of \([0-9]*\) offload bundle(s) .*, \([0-9]*\) unreadable, \([0-9]*\) bundle magic(s) not a bundle, .*/\1 \2 \3 \4/p' | head -n 1)
  fi
  say rccl.build "$lib" "$inj" "$ib" "${objs:--}"
done
K=/sys/class/kfd/kfd/topology/nodes
if [ -d "$K" ]; then
  say kfd yes
  for n in "$K"/*; do
    [ -r "$n/properties" ] || continue
    g=-
    m=-
    while read -r k v; do
      case $k in
        gfx_target_version) g=$v ;;
        drm_render_minor) m=$v ;;
      esac
    done <"$n/properties"
    say kfd.node "${n##*/}" "$g" "$m"
  done
else
  say kfd no
fi
if [ -r /opt/halobox/librccl.so.1.sha256 ]; then
  say rccl.file "$(cut -d' ' -f1 </opt/halobox/librccl.so.1.sha256)"
fi
py=
for c in "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python3}" /opt/venv/bin/python3 /opt/venv/bin/python; do
  if [ -n "$c" ] && [ -x "$c" ]; then py=$c; break; fi
done
[ -n "$py" ] || py=$(command -v python3 2>/dev/null) || py=
if [ -n "$py" ]; then
  say python "$py" "$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>&1 | flat)"
  for part in torch amdsmi vllm; do
    out=$($T "$py" -c "$PYPROBE" "$part" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep "^$P "
    if [ "$rc" != 0 ]; then
      say py.exit "$part" "$rc" "$(printf '%s\n' "$out" | grep -v "^$P " | tail -n 3 | flat)"
    fi
  done
else
  say python -
fi
# RCCL net plugins on the loader's path (NCCL_NET_PLUGIN=NAME loads
# librccl-net-NAME.so; OdinLink's build name librccl_net_odl_tb5.so by its
# path), the first of each name as the loader finds it, each loaded with
# dlopen(RTLD_NOW) through python's ctypes: `ok` and the ncclNetPlugin_v*
# symbols it exports, or `err` and the loader's words; `-` without python.
NETPROBE='
import ctypes, sys
try:
    lib = ctypes.CDLL(sys.argv[1])
except OSError as e:
    print("err", e)
    sys.exit(0)
found = []
for v in range(12, 1, -1):
    try:
        getattr(lib, "ncclNetPlugin_v%d" % v)
        found.append("v%d" % v)
    except AttributeError:
        pass
print("ok", ",".join(found) or "-")
'
dirs=$(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' ' ')
for c in /etc/ld.so.conf /etc/ld.so.conf.d/*.conf; do
  [ -r "$c" ] || continue
  dirs="$dirs $(sed -n 's/#.*//; s/^[[:space:]]*\(\/[^[:space:]]*\).*/\1/p' "$c" | tr '\n' ' ')"
done
names=
for d in $dirs /lib /usr/lib /lib64 /usr/lib64 /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/local/lib /opt/rocm/lib /opt/rocm/lib64; do
  for f in "$d"/librccl-net*.so "$d"/libnccl-net*.so "$d"/librccl_net_*odl_tb5*.so; do
    [ -f "$f" ] || continue
    case " $names " in *" ${f##*/} "*) continue ;; esac
    names="$names ${f##*/}"
    out=-
    if [ -n "$py" ]; then out=$($T "$py" -c "$NETPROBE" "$f" 2>&1 | flat); fi
    say netplugin "$f" "${out:--}"
  done
done
ray=
for c in "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/ray}" /opt/venv/bin/ray; do
  if [ -n "$c" ] && [ -x "$c" ]; then ray=$c; break; fi
done
[ -n "$ray" ] || ray=$(command -v ray 2>/dev/null) || ray=
if [ -n "$ray" ]; then
  say ray "$ray" "$($T "$ray" --version 2>&1 | tail -n 1 | flat)"
else
  say ray -
fi
# llama.cpp: the binaries halobox runs (on PATH, else where images keep
# them), and the devices llama-server lists.
ls_bin=
for b in llama-server ggml-rpc-server rpc-server; do
  p=$(command -v "$b" 2>/dev/null) || p=
  if [ -z "$p" ]; then
    for d in /opt/llama.cpp/bin /usr/local/bin /app; do
      if [ -x "$d/$b" ]; then p=$d/$b; break; fi
    done
  fi
  say llama.bin "$b" "${p:--}"
  if [ "$b" = llama-server ]; then ls_bin=$p; fi
done
if [ -n "$ls_bin" ]; then
  say llama.version "$($T "$ls_bin" --version 2>&1 | grep -m 1 '^version' | flat)"
  out=$($T "$ls_bin" --list-devices 2>&1)
  rc=$?
  printf '%s\n' "$out" | head -n 40 | while IFS= read -r l; do
    say llama.dev "$(printf '%s' "$l" | flat)"
  done
  say llama.list "$rc"
fi
say end
