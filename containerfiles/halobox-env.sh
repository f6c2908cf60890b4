# /etc/profile.d/halobox-env.sh (from containerfiles/halobox-env.sh).
# `toolbox enter` gives login shells the host's PATH, not the image's: put the
# venv, ROCm and ROCm's LLVM (Triton compiles kernels at run time) first
# again, in the order of the image's ENV PATH (which `podman exec`/`run` use).
_halobox_rest=
_halobox_ifs=$IFS
IFS=:
for _halobox_dir in $PATH; do
  case $_halobox_dir in
    /opt/venv/bin | /opt/rocm/bin | /opt/rocm/llvm/bin | '') ;;
    *) _halobox_rest=${_halobox_rest:+$_halobox_rest:}$_halobox_dir ;;
  esac
done
IFS=$_halobox_ifs
PATH=/opt/venv/bin:/opt/rocm/bin:/opt/rocm/llvm/bin${_halobox_rest:+:$_halobox_rest}
export PATH
unset _halobox_rest _halobox_ifs _halobox_dir
# No core files by default: a crashed vLLM worker maps tens of GiB.
ulimit -S -c 0
