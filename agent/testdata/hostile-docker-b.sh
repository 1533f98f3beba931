# Run B's job on the instance run A's docker job used: nothing of A is left
# in the daemon. The test prepends BASE and DOCKER_HOST.
export DOCKER_HOST
set -e
fail=0
[ -z "$(docker ps --all --quiet)" ] || { echo "LEFT containers: $(docker ps --all --format '{{.Names}}')"; fail=1; }
[ -z "$(docker volume ls --quiet)" ] || { echo "LEFT volumes: $(docker volume ls --quiet)"; fail=1; }
docker network ls --format '{{.Name}}' | grep -qx side && { echo "LEFT network side"; fail=1; }
[ "$(docker image inspect --format '{{.Id}}' base:1)" = "$BASE" ] || { echo "LEFT base:1 names run A's image"; fail=1; }
docker image inspect trusted:latest >/dev/null 2>&1 && { echo "LEFT the name trusted:latest"; fail=1; }
exit $fail
