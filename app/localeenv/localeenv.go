// Package localeenv keeps the GUI toolkit quiet under a "C.UTF-8" locale. Fyne reads the
// locale while its packages initialise, before main runs, and logs "Fyne error: Error
// parsing user locale C" for C.<charset> and POSIX.<charset>, which are no language tags;
// every headless command of the GUI build would print that first. When the variable that
// decides the message language is such a value and LANGUAGE is unset, this sets LANGUAGE to
// "en", which the locale lookup takes instead (the C locale's messages are English, so
// nothing the user sees changes, and LC_CTYPE keeps its charset).
//
// It imports only syscall, so the package is ready to initialise almost at once; main
// imports it, and Go initialises a ready package before any later one in import-path order
// that is not yet ready, which Fyne's lang package (many imports) is not.
package localeenv

import "syscall"

func init() {
	if _, set := syscall.Getenv("LANGUAGE"); set {
		return
	}
	if isPlainC(messagesLocale()) {
		_ = syscall.Setenv("LANGUAGE", "en")
	}
}

// messagesLocale is the locale that decides the message language: the first of LC_ALL,
// LC_MESSAGES and LANG that is set and not empty.
func messagesLocale() string {
	for _, k := range [...]string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v, _ := syscall.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}

// isPlainC reports whether loc is the C or POSIX locale with a charset or modifier
// ("C.UTF-8", "POSIX@euro"): plain "C" and "POSIX" are read as no language already.
func isPlainC(loc string) bool {
	for _, base := range [...]string{"C", "POSIX"} {
		if len(loc) > len(base) && loc[:len(base)] == base && (loc[len(base)] == '.' || loc[len(base)] == '@') {
			return true
		}
	}
	return false
}
