#!/usr/bin/env bash
# Plays the battle for a few seconds in a virtual X display (Xvfb), drawn by Mesa's lavapipe
# (Vulkan on the CPU, no GPU needed), saves a PNG of the window and checks that every army is
# in the picture and that no app reported a desync (the run fails otherwise).
#
#   ./screenshot.sh [OUT.png] [SECONDS]     (defaults: archers-bevy.png, 10)
#
# Installs what it needs from Debian's packages if missing (xvfb, mesa-vulkan-drivers and the
# X libraries winit loads), then builds the example in release (the first build takes about
# 24 minutes on two cores).
set -euo pipefail
cd "$(dirname "$0")"
out=${1:-archers-bevy.png}
after=${2:-10}

packages=(xvfb xauth mesa-vulkan-drivers libvulkan1 libx11-6 libx11-xcb1 libxcursor1 libxrandr2 libxi6 libxkbcommon-x11-0)
missing=()
for package in "${packages[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
    echo "installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cargo build --release

# lavapipe's ICD file; wgpu picks Vulkan.
icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json | head -n 1)
export VK_ICD_FILENAMES=$icd WGPU_BACKEND=vulkan
# winit wants a runtime directory; a bare container may have none.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "$XDG_RUNTIME_DIR" ]; then
    XDG_RUNTIME_DIR=$(mktemp -d)
    export XDG_RUNTIME_DIR
fi
rm -f "$out"
xvfb-run --auto-servernum --server-args="-screen 0 1024x1024x24" \
    timeout 300 ./target/release/archers-bevy --screenshot "$out" --screenshot-after "$after"
test -s "$out"
echo "saved $out"
