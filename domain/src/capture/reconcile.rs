//! The start-time comparison of three records of one capture identity: the row in
//! `queuebox_capture_state`, the files of the state directory and the settings in force (plus,
//! on PostgreSQL, whether the replication slot still exists).
//!
//! Each fault below would otherwise pass unnoticed and either replay or skip log positions, so it
//! stops capture until an operator decides; delivery goes on through SQL meanwhile.

use super::lsn::Lsn;
use super::scope::CaptureScope;
use std::fmt;

/// The database's record of an identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The instance that created the record (the `identity` file holds the same value).
    pub instance_id: String,
    /// The fingerprint of the scope it was created with.
    pub fingerprint: String,
    /// The last position the owner reported, if any.
    pub log_position: Option<Lsn>,
}

/// What the state directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilesState {
    /// No directory, or no `identity` file in it.
    Empty,
    /// An `identity` file.
    Present {
        /// The instance it names.
        instance_id: String,
        /// The scope description written next to it, if any.
        scope: Option<String>,
        /// The position of `offsets.dat`, if written.
        offset: Option<Lsn>,
    },
    /// An `identity` or `offsets.dat` that cannot be read as QueueBox wrote it.
    Corrupt(String),
}

/// What the start does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing recorded anywhere: create the identity, the record and (when missing) the slot,
    /// then read from the present.
    Fresh,
    /// Everything agrees: read on from `from` (the slot's own position when `None`).
    Resume {
        /// The instance named by both records.
        instance_id: String,
        /// The recorded position.
        from: Option<Lsn>,
    },
    /// A fault that needs an operator's decision.
    Stop(Fault),
}

/// Why capture cannot start without an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The database says capture ran, but the state directory is empty.
    StateMissing {
        /// The instance the database recorded.
        recorded_instance: String,
    },
    /// The state directory names an instance the database does not know.
    FilesOfAnotherInstance {
        /// The instance of the files.
        files_instance: String,
        /// The instance of the database row, when there is one.
        recorded_instance: Option<String>,
    },
    /// The scope changed since the position was recorded.
    SettingsChanged {
        /// `name: old -> new` for each change that can be told.
        changes: Vec<String>,
    },
    /// The replication slot is gone while the state remains.
    SlotGone {
        /// The slot name.
        slot: String,
    },
    /// A state file cannot be read.
    CorruptFiles(String),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::StateMissing { recorded_instance } => write!(
                f,
                "the state directory is missing or empty, but queuebox_capture_state says capture ran before (instance {recorded_instance}); restore the volume, or reset the identity"
            ),
            Fault::FilesOfAnotherInstance {
                files_instance,
                recorded_instance: Some(recorded),
            } => write!(
                f,
                "the state files belong to another instance ({files_instance}) than queuebox_capture_state records ({recorded}); mount the right volume, or reset the identity"
            ),
            Fault::FilesOfAnotherInstance {
                files_instance,
                recorded_instance: None,
            } => write!(
                f,
                "the state files belong to instance {files_instance}, which queuebox_capture_state does not record; mount the right volume, or delete the files"
            ),
            Fault::SettingsChanged { changes } => write!(
                f,
                "the capture settings changed since the position was recorded ({}); a recorded position means nothing for the new settings, so reset the identity",
                if changes.is_empty() {
                    "the recorded description is gone".to_owned()
                } else {
                    changes.join(", ")
                }
            ),
            Fault::SlotGone { slot } => write!(
                f,
                "the replication slot {slot} is gone while the capture state remains; reset the identity so a new slot starts clean"
            ),
            Fault::CorruptFiles(what) => write!(
                f,
                "the state directory cannot be read ({what}); restore the volume, or reset the identity"
            ),
        }
    }
}

/// Decides how capture starts.
pub fn reconcile(
    recorded: Option<&Recorded>,
    files: &FilesState,
    scope: &CaptureScope,
    slot_exists: bool,
) -> Plan {
    let (instance_id, described, offset) = match files {
        FilesState::Corrupt(what) => return Plan::Stop(Fault::CorruptFiles(what.clone())),
        FilesState::Empty => {
            return match recorded {
                None => Plan::Fresh,
                Some(row) => Plan::Stop(Fault::StateMissing {
                    recorded_instance: row.instance_id.clone(),
                }),
            };
        }
        FilesState::Present {
            instance_id,
            scope,
            offset,
        } => (instance_id, scope, offset),
    };
    let Some(row) = recorded else {
        return Plan::Stop(Fault::FilesOfAnotherInstance {
            files_instance: instance_id.clone(),
            recorded_instance: None,
        });
    };
    if row.instance_id != *instance_id {
        return Plan::Stop(Fault::FilesOfAnotherInstance {
            files_instance: instance_id.clone(),
            recorded_instance: Some(row.instance_id.clone()),
        });
    }
    if row.fingerprint != scope.fingerprint() {
        let changes = described
            .as_deref()
            .map(|text| scope.changes_since(text))
            .unwrap_or_default();
        return Plan::Stop(Fault::SettingsChanged { changes });
    }
    if !slot_exists {
        return Plan::Stop(Fault::SlotGone {
            slot: scope.slot.clone(),
        });
    }
    Plan::Resume {
        instance_id: instance_id.clone(),
        from: offset.or(row.log_position),
    }
}

#[cfg(test)]
mod tests {
    use super::super::scope::tests::scope;
    use super::*;

    fn row(instance: &str) -> Recorded {
        Recorded {
            instance_id: instance.into(),
            fingerprint: scope().fingerprint(),
            log_position: Some(Lsn(100)),
        }
    }

    fn files(instance: &str, offset: Option<u64>) -> FilesState {
        FilesState::Present {
            instance_id: instance.into(),
            scope: Some(scope().describe()),
            offset: offset.map(Lsn),
        }
    }

    #[test]
    fn nothing_anywhere_starts_fresh_whether_or_not_a_slot_exists() {
        assert_eq!(
            reconcile(None, &FilesState::Empty, &scope(), false),
            Plan::Fresh
        );
        assert_eq!(
            reconcile(None, &FilesState::Empty, &scope(), true),
            Plan::Fresh
        );
    }

    #[test]
    fn agreeing_records_resume_from_the_file_position_else_the_database_one() {
        assert_eq!(
            reconcile(Some(&row("a")), &files("a", Some(200)), &scope(), true),
            Plan::Resume {
                instance_id: "a".into(),
                from: Some(Lsn(200))
            }
        );
        assert_eq!(
            reconcile(Some(&row("a")), &files("a", None), &scope(), true),
            Plan::Resume {
                instance_id: "a".into(),
                from: Some(Lsn(100))
            }
        );
    }

    #[test]
    fn an_empty_directory_after_a_recorded_run_stops() {
        let plan = reconcile(Some(&row("a")), &FilesState::Empty, &scope(), true);
        let Plan::Stop(fault) = plan else {
            panic!("expected a stop, got {plan:?}")
        };
        assert!(fault.to_string().contains("missing or empty"), "{fault}");
    }

    #[test]
    fn files_of_another_instance_stop() {
        let plan = reconcile(Some(&row("a")), &files("b", Some(1)), &scope(), true);
        assert_eq!(
            plan,
            Plan::Stop(Fault::FilesOfAnotherInstance {
                files_instance: "b".into(),
                recorded_instance: Some("a".into())
            })
        );
        let plan = reconcile(None, &files("b", Some(1)), &scope(), true);
        let Plan::Stop(fault) = plan else {
            panic!("expected a stop")
        };
        assert!(fault.to_string().contains("does not record"), "{fault}");
    }

    #[test]
    fn changed_settings_stop_naming_the_change() {
        let mut now = scope();
        now.publication = "other_pub".into();
        let plan = reconcile(Some(&row("a")), &files("a", Some(1)), &now, true);
        let Plan::Stop(fault) = plan else {
            panic!("expected a stop")
        };
        assert!(
            fault
                .to_string()
                .contains("publication: queuebox_outbox -> other_pub"),
            "{fault}"
        );
    }

    #[test]
    fn a_vanished_slot_with_state_stops() {
        let plan = reconcile(Some(&row("a")), &files("a", Some(1)), &scope(), false);
        assert_eq!(
            plan,
            Plan::Stop(Fault::SlotGone {
                slot: "queuebox_outbox".into()
            })
        );
    }

    #[test]
    fn corrupt_files_stop() {
        let plan = reconcile(
            None,
            &FilesState::Corrupt("offsets.dat: `x`".into()),
            &scope(),
            true,
        );
        assert!(matches!(plan, Plan::Stop(Fault::CorruptFiles(_))));
    }
}
