# A job of run A that reaches the docker daemon (docs/security.md, H11) and
# leaves what would follow the next run: a container watching the work
# folder (run B's checkout lands there), a volume and a network, its own
# image under the noted image's name, another name on the noted image; a
# swarm of its own with a global service on the host network that mounts
# the work folder (the swarm starts its task again when the container
# alone is removed), without the ingress network; a secret, a config, a
# plugin (docker plugin create from a folder: no registry); a docker
# context and a buildx builder with the container and volume its
# docker-container driver runs (buildx is not installed here: the builder
# is written as buildx stores it). The test prepends W (the work folder),
# BASE (the noted image's id) and DOCKER_HOST.
export DOCKER_HOST
set -e
docker run --detach --name spy --network none --volume "$W:/w" base:1 >/dev/null
docker volume create poison >/dev/null
docker network create --internal side >/dev/null
docker commit spy base:1 >/dev/null
docker tag "$BASE" trusted:latest
[ "$(docker image inspect --format '{{.Id}}' base:1)" != "$BASE" ] || { echo "base:1 did not move"; exit 1; }

docker swarm init --advertise-addr 127.0.0.1 --listen-addr 127.0.0.1:0 >/dev/null
docker service create --detach --name watch --mode global --network host --mount "type=bind,src=$W,dst=/w" base:1 >/dev/null 2>&1
i=0
until [ -n "$(docker ps --quiet --filter name=^watch.)" ]; do
	i=$((i + 1))
	[ $i -lt 150 ] || { echo "the service's task did not start"; exit 1; }
	sleep 0.2
done
echo y | docker network rm ingress >/dev/null 2>&1
echo "run A's" | docker secret create leak - >/dev/null
echo "run A's" | docker config create leak - >/dev/null
p=$(mktemp -d)
mkdir "$p/rootfs"
echo '{"description":"run A","documentation":"-","entrypoint":["/sleeper"],"interface":{"types":["docker.volumedriver/1.0"],"socket":"a.sock"},"network":{"type":"host"}}' >"$p/config.json"
docker plugin create runa "$p" >/dev/null
rm -rf "$p"
docker context create elsewhere --docker "host=unix:///tmp/elsewhere.sock" >/dev/null
mkdir -p ~/.docker/buildx/instances
echo '{"Name":"runa","Driver":"docker-container","Nodes":[{"Name":"runa0","Endpoint":"'"$DOCKER_HOST"'"}]}' >~/.docker/buildx/instances/runa
echo '{"Key":"'"$DOCKER_HOST"'","Name":"runa","Global":true}' >~/.docker/buildx/current
docker run --detach --name buildx_buildkit_runa0 --network none --volume buildx_buildkit_runa0_state:/var/lib/buildkit base:1 >/dev/null
echo "run A done"
