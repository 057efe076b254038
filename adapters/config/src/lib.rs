//! Loads and validates queuebox.yml and QUEUEBOX_ variables into typed settings.
