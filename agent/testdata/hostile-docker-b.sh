# Run B's job on the instance run A's docker job used: nothing of A is left
# in the daemon or in the docker command's own folder, and no task of A's
# swarm starts again (its restart delay is 5 s). The test prepends BASE and
# DOCKER_HOST.
export DOCKER_HOST
set -e
fail=0
swarm=$(docker info --format '{{.Swarm.LocalNodeState}}')
[ "$swarm" = inactive ] || { echo "LEFT swarm $swarm, services: $(docker service ls --format '{{.Name}}' 2>&1 | tr '\n' ' ')"; fail=1; }
[ -z "$(docker plugin ls --quiet)" ] || { echo "LEFT plugins: $(docker plugin ls --format '{{.Name}}')"; fail=1; }
[ ! -e ~/.docker ] || { echo "LEFT $(cd && find .docker -type f | tr '\n' ' ')"; fail=1; }
[ -z "$(docker volume ls --quiet)" ] || { echo "LEFT volumes: $(docker volume ls --quiet)"; fail=1; }
docker network ls --format '{{.Name}}' | grep -qx side && { echo "LEFT network side"; fail=1; }
[ "$(docker image inspect --format '{{.Id}}' base:1)" = "$BASE" ] || { echo "LEFT base:1 names run A's image"; fail=1; }
docker image inspect trusted:latest >/dev/null 2>&1 && { echo "LEFT the name trusted:latest"; fail=1; }
for i in $(seq 40); do
	if [ -n "$(docker ps --all --quiet)" ]; then
		echo "LEFT containers: $(docker ps --all --format '{{.Names}} {{.Mounts}}' | tr '\n' ' ')"
		fail=1
		break
	fi
	sleep 0.2
done
exit $fail
