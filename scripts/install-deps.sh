#!/usr/bin/env bash
# Installs the Debian packages kvserve builds and tests with, only those missing (OpenMPI: tensor parallelism;
# chromium-headless-shell: the browser CORS test; python3-jinja2: the oracle the chat-template renderings are checked
# against; libvulkan-dev, glslc: the Vulkan GPU backend and its shaders; mesa-vulkan-drivers: lavapipe, the Vulkan
# device on the CPU that its tests run on).
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config libfmt-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
          libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev clang-format libopenmpi-dev openmpi-bin
          chromium-headless-shell python3 python3-jinja2 libvulkan-dev glslc mesa-vulkan-drivers)
# Node.js and npm run the openai-client server tests; take Debian's only when none is installed.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
