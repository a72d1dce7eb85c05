# Shared by the service scripts of infra/ (sourced, not run).

# wait_port PORT NAME LOG: waits up to 10 s for a listener on 127.0.0.1:PORT; else names the log.
wait_port() {
    local port=$1 name=$2 log=$3
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "$name did not open port $port; see $log" >&2
    return 1
}
