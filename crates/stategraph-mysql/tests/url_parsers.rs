//! `MySqlConfig::from_url` never panics, whatever the text: bad URLs are `Err` values.

use proptest::prelude::*;
use stategraph_mysql::MySqlConfig;

proptest! {
    #[test]
    fn from_url_never_panics(url in any::<String>()) {
        let _ = MySqlConfig::from_url(&url);
    }

    #[test]
    fn from_url_near_the_format_never_panics(
        url in "mysql://([a-zé%0-9]{0,4}(:[a-z%]{0,4})?@)?[a-z0-9.\\[\\]:é]{0,16}(/[a-z%é]{0,6})?(\\?([a-z_]{1,16}=[a-z0-9.%-]{0,6}&?){0,4})?",
    ) {
        let _ = MySqlConfig::from_url(&url);
    }

    #[test]
    fn known_parameters_never_panic(
        key in "(pool_min|pool_max|stmt_cache_size|prefer_socket|socket|compression|tcp_nodelay|connect_timeout|statement_timeout|idle_timeout|conn_ttl|wait_timeout|require_ssl|verify_ca|ssl-mode|max_allowed_packet|secure_auth|client_found_rows|enable_cleartext_plugin|abs_conn_ttl|abs_conn_ttl_jitter|reset_connection|inactive_connection_ttl|ttl_check_interval|tcp_keepalive)",
        value in "(-?[0-9]{0,22}(\\.[0-9]{0,3})?|true|false|fast|best|[a-zé%]{0,4})",
    ) {
        let _ = MySqlConfig::from_url(&format!("mysql://u:p@127.0.0.1:3306/db?{key}={value}"));
    }
}
