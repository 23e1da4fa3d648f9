#!/usr/bin/env bash
# testdb.sh — set up the PostgreSQL database the memory store tests use, and print its DSN.
#
#   export AGENTMESH_TEST_POSTGRES_DSN=$(scripts/testdb.sh)
#
# Idempotent: it installs Debian's postgresql package when PostgreSQL is missing (as root:
# apt-get update + install), starts a cluster when none runs (creating one when none exists),
# creates or updates the role and database agentmesh_test (password agentmesh_test), waits
# until the database accepts password logins on 127.0.0.1, and prints
#   postgres://agentmesh_test:agentmesh_test@127.0.0.1:<port>/agentmesh_test?sslmode=disable
# as the only line on stdout; progress goes to stderr. Run it as root (CI) or as the
# postgres OS user once PostgreSQL is installed. Each test creates and drops its own schema in
# the database, so test packages running at the same time do not collide.
set -euo pipefail

readonly NAME=agentmesh_test
readonly PASSWORD=agentmesh_test
readonly WAIT_SECONDS=60

log() { echo "testdb: $*" >&2; }
die() { log "$*"; exit 1; }

# as_postgres runs a command as the postgres OS user.
as_postgres() {
	if [[ $(id -un) == postgres ]]; then
		"$@"
	elif [[ $(id -u) == 0 ]]; then
		runuser -u postgres -- "$@"
	else
		die "run me as root or as the postgres user (I need to manage the cluster and create roles)"
	fi
}

install_postgres() {
	if command -v pg_lsclusters >/dev/null && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
		return
	fi
	[[ $(id -u) == 0 ]] || die "PostgreSQL is not installed; run me as root to install Debian's postgresql package"
	log "installing PostgreSQL from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y --no-install-recommends postgresql >&2
}

# start_cluster starts the first cluster (creating one when none exists) and prints its port.
start_cluster() {
	local cluster
	cluster=$(pg_lsclusters --no-header | head -n 1)
	if [[ -z $cluster ]]; then
		local version
		version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
		log "creating cluster $version/main"
		pg_createcluster "$version" main >&2
		cluster=$(pg_lsclusters --no-header | head -n 1)
	fi
	local version name port status
	read -r version name port status _ <<<"$cluster"
	if [[ $status != online* ]]; then
		log "starting cluster $version/$name on port $port"
		if [[ $(id -u) == 0 ]]; then
			pg_ctlcluster "$version" "$name" start >&2
		else
			as_postgres pg_ctlcluster "$version" "$name" start >&2
		fi
	fi
	echo "$port"
}

# wait_ready waits until the cluster accepts connections on 127.0.0.1:port.
wait_ready() {
	local port=$1 deadline=$((SECONDS + WAIT_SECONDS))
	until pg_isready -q -h 127.0.0.1 -p "$port"; do
		((SECONDS < deadline)) || die "PostgreSQL did not accept connections on 127.0.0.1:$port within ${WAIT_SECONDS}s"
		sleep 0.2
	done
}

create_database() {
	local port=$1
	as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres >&2 <<SQL
DO \$\$
BEGIN
	IF EXISTS (SELECT FROM pg_roles WHERE rolname = '$NAME') THEN
		ALTER ROLE $NAME LOGIN PASSWORD '$PASSWORD';
	ELSE
		CREATE ROLE $NAME LOGIN PASSWORD '$PASSWORD';
	END IF;
END
\$\$;
SQL
	if [[ -z $(as_postgres psql -X -tA -p "$port" -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$NAME'") ]]; then
		log "creating database $NAME"
		as_postgres createdb -p "$port" -O "$NAME" "$NAME" >&2
	fi
}

main() {
	install_postgres
	local port
	port=$(start_cluster)
	wait_ready "$port"
	create_database "$port"
	local dsn="postgres://$NAME:$PASSWORD@127.0.0.1:$port/$NAME?sslmode=disable"
	PGPASSWORD=$PASSWORD psql -X -q -h 127.0.0.1 -p "$port" -U "$NAME" -d "$NAME" -c 'SELECT 1' >/dev/null ||
		die "cannot log in as $NAME on 127.0.0.1:$port with a password (check pg_hba.conf)"
	log "ready"
	echo "$dsn"
}

main "$@"
