//! Where a lake lives, as a URL: what every command's `--lake` takes.

use crate::LakeError;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use url::Url;

/// The root of a lake. A plain path (relative or absolute) or a `file://` URL names a local
/// directory; `s3://bucket/prefix` (or `s3a://`) names a prefix in an S3 bucket, reached with
/// the standard AWS variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`), which delta-rs reads itself: they never pass through
/// lkplake, so no message can carry them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LakeUrl {
    /// Always ends in `/`, so a table name joins below it.
    root: Url,
    /// The text the user gave, for messages.
    given: String,
}

impl LakeUrl {
    /// A lake in a local directory.
    pub fn local(path: &Path) -> Result<Self, LakeError> {
        let given = path.display().to_string();
        let absolute = std::path::absolute(path).map_err(|source| LakeError::Io {
            path: path.to_owned(),
            source,
        })?;
        let root = Url::from_directory_path(&absolute).map_err(|()| LakeError::Url {
            url: given.clone(),
            reason: "not an absolute local path".to_owned(),
        })?;
        Ok(Self { root, given })
    }

    /// The URL of table `name`.
    pub fn table(&self, name: &str) -> Result<Url, LakeError> {
        self.root
            .join(&format!("{name}/"))
            .map_err(|e| LakeError::Url {
                url: format!("{}{name}", self.root),
                reason: e.to_string(),
            })
    }

    /// The local directory of the lake, when it is one.
    pub fn local_path(&self) -> Option<PathBuf> {
        (self.root.scheme() == "file")
            .then(|| self.root.to_file_path().ok())
            .flatten()
    }

    /// The local directory of table `name`, when the lake is local.
    pub fn local_table(&self, name: &str) -> Option<PathBuf> {
        self.local_path().map(|root| root.join(name))
    }
}

impl FromStr for LakeUrl {
    type Err = LakeError;

    fn from_str(text: &str) -> Result<Self, LakeError> {
        if !text.contains("://") {
            return Self::local(Path::new(text));
        }
        let url = Url::parse(text).map_err(|e| LakeError::Url {
            url: text.to_owned(),
            reason: e.to_string(),
        })?;
        match url.scheme() {
            "file" => {
                let path = url.to_file_path().map_err(|()| LakeError::Url {
                    url: text.to_owned(),
                    reason: "a file URL needs an absolute path (file:///srv/lake)".to_owned(),
                })?;
                let mut lake = Self::local(&path)?;
                lake.given = text.to_owned();
                Ok(lake)
            }
            "s3" | "s3a" => Self::object_store(url, text),
            other => Err(LakeError::Url {
                url: text.to_owned(),
                reason: format!(
                    "lakes live in local directories (a path or file://) or on S3 (s3://bucket/prefix), not {other}://"
                ),
            }),
        }
    }
}

impl LakeUrl {
    /// A lake below a bucket's prefix. Credentials in the URL are refused: they would be
    /// printed with every message that names the lake.
    fn object_store(mut url: Url, text: &str) -> Result<Self, LakeError> {
        let refuse = |reason: &str| LakeError::Url {
            url: text.to_owned(),
            reason: reason.to_owned(),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(LakeError::Url {
                // Not the text given: it holds the secret.
                url: format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default()),
                reason: "credentials do not belong in the lake's URL: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".to_owned(),
            });
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(refuse("an S3 lake needs a bucket: s3://bucket/prefix"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(refuse("an S3 lake's URL takes no query or fragment"));
        }
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        crate::object_store::register();
        Ok(Self {
            root: url,
            given: text.to_owned(),
        })
    }
}

impl fmt::Display for LakeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.given)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_path_is_a_local_lake_with_tables_below_it() -> Result<(), LakeError> {
        let lake: LakeUrl = "/srv/lkp/lake".parse()?;
        assert_eq!(lake.local_path(), Some(PathBuf::from("/srv/lkp/lake")));
        assert_eq!(
            lake.table("metrics")?.as_str(),
            "file:///srv/lkp/lake/metrics/"
        );
        assert_eq!(lake.to_string(), "/srv/lkp/lake");
        Ok(())
    }

    #[test]
    fn a_relative_path_is_resolved_against_the_working_directory() -> Result<(), LakeError> {
        let lake: LakeUrl = "lake".parse()?;
        let cwd = std::env::current_dir().map_err(|source| LakeError::Io {
            path: PathBuf::from("."),
            source,
        })?;
        assert_eq!(lake.local_path(), Some(cwd.join("lake")));
        Ok(())
    }

    #[test]
    fn a_file_url_names_the_same_lake_as_its_path() -> Result<(), LakeError> {
        let url: LakeUrl = "file:///srv/lkp/lake".parse()?;
        let path: LakeUrl = "/srv/lkp/lake/".parse()?;
        assert_eq!(url.table("reports")?, path.table("reports")?);
        Ok(())
    }

    #[test]
    fn an_unsupported_scheme_is_refused_with_the_url_named() {
        let err = "gs://bucket/lake".parse::<LakeUrl>().map(|_| ());
        let Err(err) = err else {
            panic!("gs:// was accepted without an object store");
        };
        let text = err.to_string();
        assert!(text.contains("gs://bucket/lake"), "{text}");
        assert!(text.contains("not gs://"), "{text}");
    }

    #[test]
    fn an_s3_url_names_tables_below_its_prefix() -> Result<(), LakeError> {
        let lake: LakeUrl = "s3://lkp/lake".parse()?;
        assert_eq!(lake.table("metrics")?.as_str(), "s3://lkp/lake/metrics/");
        assert_eq!(lake.local_path(), None);
        assert_eq!(lake.to_string(), "s3://lkp/lake");
        let bucket: LakeUrl = "s3a://lkp".parse()?;
        assert_eq!(bucket.table("reports")?.as_str(), "s3a://lkp/reports/");
        Ok(())
    }

    #[test]
    fn credentials_in_an_s3_url_are_refused_without_repeating_them() {
        let Err(err) = "s3://AKIDEXAMPLE:wJalrXUtnFEMI@lkp/lake".parse::<LakeUrl>() else {
            panic!("credentials in the URL were accepted");
        };
        let text = err.to_string();
        assert!(!text.contains("wJalrXUtnFEMI"), "{text}");
        assert!(!text.contains("AKIDEXAMPLE"), "{text}");
        assert!(text.contains("AWS_SECRET_ACCESS_KEY"), "{text}");
    }

    #[test]
    fn an_s3_url_without_a_bucket_is_refused() {
        let Err(err) = "s3:///lake".parse::<LakeUrl>() else {
            panic!("an S3 URL without a bucket was accepted");
        };
        assert!(err.to_string().contains("needs a bucket"), "{err}");
    }
}
