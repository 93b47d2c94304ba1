; Strata's Windows installer (NSIS 3). Built by packaging/windows/installer.sh:
;   makensis -DVERSION=0.1.0 -DBUILD=1 -DBINDIR=dist/windows -DOUTFILE=... strata.nsi
;
; Per-user by default: no admin prompt, files in %LOCALAPPDATA%\Programs\Strata, registry
; entries under HKCU only. Silent install: Setup.exe /S (add /NODESKTOP for no desktop
; shortcut). Silent uninstall: uninstall.exe /S keeps chats and settings; /S /PURGE also
; deletes them.

Unicode true
Target amd64-unicode
RequestExecutionLevel user
SetCompressor /SOLID lzma
ManifestDPIAware true

!ifndef VERSION
  !error "pass -DVERSION=x.y.z"
!endif
!ifndef BUILD
  !define BUILD 0
!endif
!ifndef BINDIR
  !error "pass -DBINDIR=folder with strata.exe and strata-cli.exe"
!endif
!ifndef OUTFILE
  !define OUTFILE "Strata-Setup-${VERSION}.exe"
!endif

!define APP "Strata"
!define PUBLISHER "Strata"
!define UNINST_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\${APP}"
!define PROGID "Strata.gguf"

!include "MUI2.nsh"
!include "FileFunc.nsh"
!include "LogicLib.nsh"

Name "${APP}"
OutFile "${OUTFILE}"
InstallDir "$LOCALAPPDATA\Programs\${APP}"
InstallDirRegKey HKCU "Software\${APP}" "InstallDir"
BrandingText "${APP} ${VERSION}"

VIProductVersion "${VERSION}.${BUILD}"
VIAddVersionKey "ProductName" "${APP}"
VIAddVersionKey "ProductVersion" "${VERSION}"
VIAddVersionKey "FileVersion" "${VERSION}.${BUILD}"
VIAddVersionKey "FileDescription" "${APP} installer"
VIAddVersionKey "CompanyName" "${PUBLISHER}"
VIAddVersionKey "LegalCopyright" "${PUBLISHER}"

!define MUI_ICON "../../assets/icon.ico"
!define MUI_UNICON "../../assets/icon.ico"
!define MUI_ABORTWARNING
!define MUI_FINISHPAGE_RUN "$INSTDIR\strata.exe"
!define MUI_FINISHPAGE_RUN_TEXT "Open ${APP}"

!insertmacro MUI_PAGE_WELCOME
!insertmacro MUI_PAGE_COMPONENTS
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!insertmacro MUI_PAGE_FINISH
!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES
!insertmacro MUI_LANGUAGE "English"

Section "${APP} (required)" SecApp
  SectionIn RO
  SetOutPath "$INSTDIR"
  File "${BINDIR}/strata.exe"
  File "${BINDIR}/strata-cli.exe"
  ; The multi-size icon (16-256 px) for shortcuts and Explorer; the exe holds only 256 px.
  File "/oname=strata.ico" "../../assets/icon.ico"
  WriteUninstaller "$INSTDIR\uninstall.exe"

  CreateShortCut "$SMPROGRAMS\${APP}.lnk" "$INSTDIR\strata.exe" "" "$INSTDIR\strata.ico" 0

  WriteRegStr HKCU "Software\${APP}" "InstallDir" "$INSTDIR"

  ; "Open with Strata" for .gguf files: a ProgID listed under OpenWithProgids (it does not
  ; take over the default program) and a named verb on every .gguf file.
  WriteRegStr HKCU "Software\Classes\${PROGID}" "" "GGUF model"
  WriteRegStr HKCU "Software\Classes\${PROGID}\DefaultIcon" "" "$INSTDIR\strata.ico"
  WriteRegStr HKCU "Software\Classes\${PROGID}\shell\open" "" "Open with ${APP}"
  WriteRegStr HKCU "Software\Classes\${PROGID}\shell\open\command" "" '"$INSTDIR\strata.exe" "%1"'
  WriteRegStr HKCU "Software\Classes\.gguf\OpenWithProgids" "${PROGID}" ""
  WriteRegStr HKCU "Software\Classes\SystemFileAssociations\.gguf\shell\${APP}" "" "Open with ${APP}"
  WriteRegStr HKCU "Software\Classes\SystemFileAssociations\.gguf\shell\${APP}" "Icon" "$INSTDIR\strata.ico"
  WriteRegStr HKCU "Software\Classes\SystemFileAssociations\.gguf\shell\${APP}\command" "" '"$INSTDIR\strata.exe" "%1"'
  WriteRegStr HKCU "Software\Classes\Applications\strata.exe\SupportedTypes" ".gguf" ""
  WriteRegStr HKCU "Software\Classes\Applications\strata.exe\shell\open\command" "" '"$INSTDIR\strata.exe" "%1"'
  System::Call 'shell32::SHChangeNotify(i 0x08000000, i 0, p 0, p 0)' ; SHCNE_ASSOCCHANGED

  ; Apps & Features.
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayName" "${APP}"
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINST_KEY}" "Publisher" "${PUBLISHER}"
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayIcon" "$INSTDIR\strata.ico"
  WriteRegStr HKCU "${UNINST_KEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINST_KEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegStr HKCU "${UNINST_KEY}" "QuietUninstallString" '"$INSTDIR\uninstall.exe" /S'
  WriteRegDWORD HKCU "${UNINST_KEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINST_KEY}" "NoRepair" 1
  ${GetSize} "$INSTDIR" "/S=0K" $0 $1 $2
  IntFmt $0 "0x%08X" $0
  WriteRegDWORD HKCU "${UNINST_KEY}" "EstimatedSize" $0
SectionEnd

Section "Desktop shortcut" SecDesktop
  CreateShortCut "$DESKTOP\${APP}.lnk" "$INSTDIR\strata.exe" "" "$INSTDIR\strata.ico" 0
SectionEnd

!insertmacro MUI_FUNCTION_DESCRIPTION_BEGIN
  !insertmacro MUI_DESCRIPTION_TEXT ${SecApp} "The ${APP} app (strata.exe) and its command line (strata-cli.exe)."
  !insertmacro MUI_DESCRIPTION_TEXT ${SecDesktop} "A shortcut to ${APP} on the desktop."
!insertmacro MUI_FUNCTION_DESCRIPTION_END

Function .onInit
  ; /NODESKTOP: no desktop shortcut (for scripted installs).
  ${GetParameters} $0
  ClearErrors
  ${GetOptions} $0 "/NODESKTOP" $1
  ${IfNot} ${Errors}
    SectionSetFlags ${SecDesktop} 0
  ${EndIf}
FunctionEnd

Section "Uninstall"
  Delete "$INSTDIR\strata.exe"
  Delete "$INSTDIR\strata-cli.exe"
  Delete "$INSTDIR\strata.ico"
  Delete "$INSTDIR\uninstall.exe"
  RMDir "$INSTDIR"
  Delete "$SMPROGRAMS\${APP}.lnk"
  Delete "$DESKTOP\${APP}.lnk"

  DeleteRegKey HKCU "Software\Classes\${PROGID}"
  DeleteRegValue HKCU "Software\Classes\.gguf\OpenWithProgids" "${PROGID}"
  DeleteRegKey /ifempty HKCU "Software\Classes\.gguf\OpenWithProgids"
  DeleteRegKey /ifempty HKCU "Software\Classes\.gguf"
  DeleteRegKey HKCU "Software\Classes\SystemFileAssociations\.gguf\shell\${APP}"
  DeleteRegKey HKCU "Software\Classes\Applications\strata.exe"
  System::Call 'shell32::SHChangeNotify(i 0x08000000, i 0, p 0, p 0)'
  DeleteRegKey HKCU "${UNINST_KEY}"
  DeleteRegKey HKCU "Software\${APP}"

  ; Chats and settings (app/store): settings in %APPDATA%\strata, chats and caches in
  ; %LOCALAPPDATA%\strata, Fyne's preferences in %APPDATA%\fyne\org.strata.desktop. Asked
  ; interactively; a silent uninstall keeps them unless /PURGE is given.
  ${GetParameters} $0
  ClearErrors
  ${GetOptions} $0 "/PURGE" $1
  ${If} ${Errors}
    MessageBox MB_YESNO|MB_ICONQUESTION|MB_DEFBUTTON2 \
      "Also delete your Strata chats and settings?$\r$\n($APPDATA\strata and $LOCALAPPDATA\strata)" \
      /SD IDNO IDNO keep
  ${EndIf}
  RMDir /r "$APPDATA\strata"
  RMDir /r "$LOCALAPPDATA\strata"
  RMDir /r "$APPDATA\fyne\org.strata.desktop"
  RMDir "$APPDATA\fyne"
  keep:
SectionEnd
