# Copyright IBM Corp. 2013, 2026
// SPDX-License-Identifier: MPL-2.0

schema_version = 1

project {
  license        = "MPL-2.0"
  copyright_year = 2013
}
