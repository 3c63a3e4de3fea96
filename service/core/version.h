/* version: the release string, set by the build. */
#ifndef ENTITYD_VERSION_H
#define ENTITYD_VERSION_H
#ifndef ENTITYD_VERSION
#define ENTITYD_VERSION "0.0.0-dev"
#endif
#endif
