//! Store URLs: `sqlite://PATH`, `redis://...`, `postgres://...`, `mysql://...`, `memory:`.

/// `url` with any password replaced by `***`, for messages.
#[must_use]
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}
