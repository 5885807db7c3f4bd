# SKV identity: an operator can tell SKV from upstream Redis, and which
# upstream release it is built on.

source tests/skv/helpers.tcl

start_server {tags {"skv identity"}} {
    test {INFO server shows the SKV version beside upstream's} {
        assert_equal [skv_source_version] [s skv_version]
        assert_equal [skv_pin UPSTREAM_VERSION] [s redis_version]
    }

    test {redis-server --version shows both versions} {
        set line [exec src/redis-server --version]
        assert_match "Redis server v=[skv_pin UPSTREAM_VERSION] sha=* skv=[skv_source_version]" $line
    }

    test {The startup log names both versions} {
        verify_log_message 0 "*Redis version=[skv_pin UPSTREAM_VERSION], SKV version=[skv_source_version],*" 0
    }
}
