# A job of run A that reaches the docker daemon (docs/security.md, H11) and
# leaves what would follow the next run: a container watching the work
# folder (run B's checkout lands there), a volume and a network, its own
# image under the noted image's name, another name on the noted image. The
# test prepends W (the work folder), BASE (the noted image's id) and
# DOCKER_HOST.
export DOCKER_HOST
set -e
docker run --detach --name spy --network none --volume "$W:/w" base:1 >/dev/null
docker volume create poison >/dev/null
docker network create --internal side >/dev/null
docker commit spy base:1 >/dev/null
docker tag "$BASE" trusted:latest
[ "$(docker image inspect --format '{{.Id}}' base:1)" != "$BASE" ] || { echo "base:1 did not move"; exit 1; }
echo "run A done"
